from __future__ import annotations

from django.contrib.auth.decorators import user_passes_test
from django.urls import path

from tests.testapp import views

urlpatterns = [
    path("effect/", views.record_effect, name="test-record-effect"),
    path("slow-effect/", views.slow_effect, name="test-slow-effect"),
    path("wait/", views.wait, name="test-wait"),
    path("undeclared-effect/", views.undeclared_effect, name="test-undeclared-effect"),
    # Overlaps, on purpose: an address of test_overlap_note whose name ends in "/other" is another
    # view's; test_shadowed_note's address is caught by the broader pattern before it; a
    # test_pair_note address splits into other arguments than those it was built from.
    path("overlap/<int:pk>/other/", views.overlap_other, name="test-overlap-other"),
    path("overlap/<path:name>/", views.overlap_note, name="test-overlap-note"),
    path("shadow/<str:word>/", views.shadow_catch_all, name="test-shadow-catch-all"),
    path("shadow/new/", views.shadowed_note, name="test-shadowed-note"),
    path("pair/<path:left>/<path:right>/", views.pair_note, name="test-pair-note"),
    path("whoami/", views.whoami, name="test-whoami"),
    path("csrf-seen/", views.csrf_seen, name="test-csrf-seen"),
    path("async-effect/", views.async_effect, name="test-async-effect"),
    path("flash/", views.flash, name="test-flash"),
    path("note-page/", views.note_page, name="test-note-page"),
    path("note-page/save/", views.note_page_save, name="test-note-page-save"),
    path("effects/<int:pk>/", views.EffectDetailView.as_view(), name="test-effect-detail"),
    path("notes/", views.NotesView.as_view(), name="test-notes"),
    path("effects/", views.EffectListView.as_view(), name="test-effect-list"),
    path("problem-json/", views.problem_json, name="test-problem-json"),
    path("tasks/<int:pk>/change/", views.ConfirmedTaskUpdateView.as_view(), name="test-task-change"),
    path("forget/", views.forget_effects, name="test-forget-effects"),
    path("effects/<int:pk>/broken-delete/", views.BrokenLookupDeleteView.as_view(), name="test-broken-delete"),
    path("effects/<int:pk>/staff-delete/", user_passes_test(lambda user: user.is_staff)(
        views.StaffOnlyDeleteView.as_view()), name="test-staff-delete"),
]
