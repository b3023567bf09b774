from __future__ import annotations

from django.urls import path

from tracker import views

app_name = "tracker"

urlpatterns = [
    path("", views.ProjectListView.as_view(), name="project_list"),
    path("projects/new/", views.ProjectCreateView.as_view(), name="project_create"),
    path("projects/<int:pk>/", views.ProjectDetailView.as_view(), name="project_detail"),
    path("projects/<int:pk>/edit/", views.ProjectUpdateView.as_view(), name="project_update"),
    path("projects/<int:pk>/archive/", views.project_archive, name="project_archive"),
    path("projects/<int:pk>/delete/", views.ProjectDeleteView.as_view(), name="project_delete"),
    path("projects/<int:pk>/stats.json", views.project_stats, name="project_stats"),
    path("projects/<int:pk>/import/", views.TaskImportView.as_view(), name="project_import"),
    path("tasks/", views.TaskListView.as_view(), name="task_list"),
    path("tasks/new/", views.TaskCreateView.as_view(), name="task_create"),
    path("tasks/<int:pk>/", views.TaskDetailView.as_view(), name="task_detail"),
    path("tasks/<int:pk>/edit/", views.TaskUpdateView.as_view(), name="task_update"),
    path("tasks/<int:pk>/complete/", views.task_complete, name="task_complete"),
    path("tasks/<int:pk>/delete/", views.TaskDeleteView.as_view(), name="task_delete"),
    path("tasks/<int:pk>/comments/", views.comment_create, name="comment_create"),
    path("tasks/<int:pk>/files/", views.task_attach, name="task_attach"),
    path("tasks/<int:pk>/files/<int:file_id>/", views.task_file, name="task_file"),
]
