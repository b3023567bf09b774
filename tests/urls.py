from __future__ import annotations

from django.urls import include, path

from config.urls import urlpatterns as site_urlpatterns

urlpatterns = [*site_urlpatterns, path("test-tools/", include("tests.testapp.urls"))]
