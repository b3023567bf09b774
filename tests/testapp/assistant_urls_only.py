"""A host URLconf with the assistant's own include and none of its sub-apps' (what assistant.W041 and
assistant.W051 name)."""

from django.urls import include, path

urlpatterns = [path("assistant/", include("assistant.urls"))]
