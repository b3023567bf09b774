"""A host URLconf that routes the OAuth endpoints to django-mcpz's own views (the mistake check E041 names)."""

from django.urls import include, path

from config.urls import urlpatterns as site_urlpatterns

urlpatterns = [
    path("oauth/", include("django_mcpz.oauth.urls")),
    *(pattern for pattern in site_urlpatterns if "oauth" not in str(pattern.pattern)),
]
