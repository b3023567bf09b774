from __future__ import annotations

from django.urls import path

from tests.testapp import views

urlpatterns = [
    path("effect/", views.record_effect, name="test-record-effect"),
    path("slow-effect/", views.slow_effect, name="test-slow-effect"),
    path("wait/", views.wait, name="test-wait"),
    path("undeclared-effect/", views.undeclared_effect, name="test-undeclared-effect"),
]
