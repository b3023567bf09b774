from __future__ import annotations

from django.urls import path

from tests.testapp import views

urlpatterns = [
    path("effect/", views.record_effect, name="test-record-effect"),
    path("slow-effect/", views.slow_effect, name="test-slow-effect"),
    path("wait/", views.wait, name="test-wait"),
    path("whoami/", views.whoami, name="test-whoami"),
    path("csrf-seen/", views.csrf_seen, name="test-csrf-seen"),
    path("async-effect/", views.async_effect, name="test-async-effect"),
    path("flash/", views.flash, name="test-flash"),
]
