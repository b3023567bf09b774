from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.django_db
def test_login_page_renders_in_the_site_shell() -> None:
    response = Client().get("/login/")
    assert response.status_code == 200
    assert b"Log in" in response.content
