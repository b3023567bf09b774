"""What a host project gets: the distribution (built from this repo) carries the two apps with their
templates, static files, migrations and type marker, and nothing of this repo's site; the dock is one
template tag; the assistant's page works with no layout of the host's and inside one named by a setting."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.staticfiles import finders
from django.core.exceptions import ImproperlyConfigured
from django.template import Context, Template
from django.test import Client, RequestFactory, override_settings
from django.urls import reverse

from tests.conftest import PROJECT_DIR

APPS = ("assistant", "registry")
# The admin's own templates: an app's admin pages extend them, and every host that has the admin has them.
DJANGO_ADMIN_TEMPLATES = Path(admin.__file__).resolve().parent / "templates"
SITE_PACKAGES = ("config", "tracker", "devstack", "tests", "benchmarks")
# What a checkout holds that is not source: never copied into the build.
NOT_SOURCE = shutil.ignore_patterns(".git", ".data", ".venv", "build", "dist", "*.egg-info", "__pycache__", "*.pyc",
                                    ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis")


def _source_files(app: str) -> set[str]:
    """Every file of an app in the source tree, as a path inside the wheel (assistant/static/...)."""
    root = PROJECT_DIR / app
    files = set()
    for path in root.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files.add(path.relative_to(PROJECT_DIR).as_posix())
    return files


def _referenced_by_templates(app: str) -> tuple[set[str], set[str]]:
    """The static files and templates an app's own templates name ({% static %}, include, extends)."""
    statics, templates = set(), set()
    for path in (PROJECT_DIR / app / "templates").rglob("*.html"):
        text = path.read_text()
        statics |= set(re.findall(r"""\{%\s*static\s+["']([^"']+)["']""", text))
        templates |= set(re.findall(r"""\{%\s*(?:include|extends)\s+["']([^"']+)["']""", text))
    return statics, templates


def _django_admin_templates(names: set[str]) -> set[str]:
    """Those of `names` that django.contrib.admin ships itself (such as admin/change_form.html)."""
    return {name for name in names if (DJANGO_ADMIN_TEMPLATES / name).is_file()}


def _build(tmp_path_factory: pytest.TempPathFactory, command: list[str]) -> Path:
    """Runs a build command in a copy of the checkout (a build writes build/ and *.egg-info next to the
    sources) and returns the one wheel it made."""
    import setuptools

    if tuple(int(part) for part in setuptools.__version__.split(".")[:2]) < (70, 1):
        pytest.fail(f"setuptools {setuptools.__version__} cannot build a wheel offline; the dev dependencies "
                    "(make install) bring setuptools>=70.1")
    source = tmp_path_factory.mktemp("checkout") / "repo"
    shutil.copytree(PROJECT_DIR, source, ignore=NOT_SOURCE)
    out = tmp_path_factory.mktemp("wheels")
    completed = subprocess.run(
        [*command, str(out)], cwd=source, capture_output=True, text=True, timeout=180,
        env={**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip install .` would install, built offline from this checkout."""
    return _build(tmp_path_factory, [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                                     "--quiet", ".", "--wheel-dir"])


@pytest.fixture(scope="module")
def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_the_wheel_carries_every_file_of_the_two_apps(wheel_files: set[str]) -> None:
    for app in APPS:
        source = _source_files(app)
        assert any("/templates/" in name for name in source) or app == "registry"
        missing = source - wheel_files
        assert not missing, f"the wheel lacks {sorted(missing)}"
        assert f"{app}/py.typed" in wheel_files
        assert f"{app}/migrations/0001_initial.py" in wheel_files
    assert {"assistant/templates/assistant/dock.html", "assistant/static/assistant/assistant.css",
            "assistant/static/assistant/conversation.js", "assistant/static/assistant/dock.js"} <= wheel_files


def test_every_static_file_and_template_the_apps_templates_name_is_in_the_wheel(wheel_files: set[str]) -> None:
    for app in APPS:
        statics, templates = _referenced_by_templates(app)
        for name in statics:
            assert f"{app}/static/{name}" in wheel_files, f"{name} is named by a template but not shipped by {app}"
        for name in templates - _django_admin_templates(templates):
            assert any(f"{owner}/templates/{name}" in wheel_files for owner in APPS), (
                f"{name} is included or extended by an app template but shipped by no app"
            )


def test_the_wheel_installs_the_two_apps_and_nothing_of_the_site(wheel_files: set[str]) -> None:
    top_level = {name.split("/")[0] for name in wheel_files if not name.split("/")[0].endswith(".dist-info")}
    assert top_level == set(APPS)
    assert not any(name.startswith(f"{package}/") for name in wheel_files for package in SITE_PACKAGES)


def test_an_editable_install_exposes_only_the_two_apps(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`pip install -e .` (what `make` does) must not graft this repo's `config` into a host's imports."""
    wheel = _build(tmp_path_factory, [sys.executable, "-c",
                                      "import sys; from setuptools import build_meta as backend; "
                                      "backend.build_editable(sys.argv[1])"])
    with zipfile.ZipFile(wheel) as archive:
        texts = {name: archive.read(name).decode() for name in archive.namelist() if name.endswith((".py", ".pth"))}
    finders_text = [text for name, text in texts.items() if name.endswith("_finder.py")]
    assert finders_text, f"expected an import finder mapping named packages, got {sorted(texts)}"
    mapping = json.loads(re.search(r"MAPPING: dict\[str, str\] = (\{.*?\})\n", finders_text[0])
                         .group(1).replace("'", '"'))
    assert set(mapping) == set(APPS)
    # No .pth line that puts the checkout itself on sys.path (which would expose every folder in it).
    for name, text in texts.items():
        if name.endswith(".pth"):
            assert all(line.startswith("import ") for line in text.splitlines() if line.strip()), text


def test_the_installed_wheel_renders_the_dock_and_serves_its_files_away_from_this_repo(
    wheel: Path, tmp_path: Path
) -> None:
    """Installed (not editable) into a folder of its own and used by a project that is not this repo."""
    target = tmp_path / "site-packages"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--disable-pip-version-check", "--target", str(target), str(wheel)], check=True, timeout=120)
    project = tmp_path / "host"
    project.mkdir()
    (project / "host_settings.py").write_text(
        "SECRET_KEY = 'x'\n"
        "INSTALLED_APPS = ['django.contrib.auth', 'django.contrib.contenttypes', 'django.contrib.staticfiles',\n"
        "                  'assistant', 'registry']\n"
        "ROOT_URLCONF = 'host_urls'\n"
        "STATIC_URL = 'static/'\n"
        "TEMPLATES = [{'BACKEND': 'django.template.backends.django.DjangoTemplates', 'APP_DIRS': True}]\n"
        "DATABASES = {}\n"
    )
    (project / "host_urls.py").write_text(
        "from django.urls import include, path\nurlpatterns = [path('assistant/', include('assistant.urls'))]\n"
    )
    probe = (
        "import json, django, assistant\n"
        "django.setup()\n"
        "from django.contrib.auth.models import User\n"
        "from django.contrib.staticfiles import finders\n"
        "from django.template import Context, Template\n"
        "html = Template('{% load assistant %}{% assistant_dock %}').render(Context({'user': User(username='a')}))\n"
        "names = ['assistant/assistant.css', 'assistant/dock.js', 'assistant/conversation.js']\n"
        "print(json.dumps({'module': assistant.__file__, 'html': html,\n"
        "                  'static': {name: finders.find(name) for name in names}}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target), "DJANGO_SETTINGS_MODULE": "host_settings"}
    completed = subprocess.run([sys.executable, "-c", probe], cwd=project, env=env, capture_output=True, text=True,
                               timeout=60)
    assert completed.returncode == 0, completed.stderr[-3000:]
    found = json.loads(completed.stdout)
    assert found["module"].startswith(str(target))
    assert 'id="assistant-dock"' in found["html"]
    for name, path in found["static"].items():
        assert path and path.startswith(str(target)), f"{name} was not found in the installed app: {path}"


# The template tag and the page, in this process.


def _render_tag(user: Any) -> str:
    request = RequestFactory().get("/")
    request.user = user
    return Template("{% load assistant %}<main>page</main>{% assistant_dock %}").render(
        Context({"request": request, "user": user})
    )


@pytest.mark.django_db
def test_the_tag_brings_the_dock_its_css_and_its_js(alice: Any) -> None:
    html = _render_tag(alice)
    assert 'id="assistant-dock"' in html and 'class="assistant-launcher"' in html
    assert "data-assistant-conversation" in html
    for name in ["assistant/assistant.css", "assistant/dock.js", "assistant/conversation.js"]:
        assert f'"/static/{name}"' in html
        # Served from the app itself, not from a copy in the site's static folder.
        assert Path(finders.find(name)).is_relative_to(PROJECT_DIR / "assistant" / "static")
    assert f'href="{reverse("assistant:page")}"' in html


def test_the_tag_draws_nothing_for_a_visitor_who_is_not_signed_in() -> None:
    from django.contrib.auth.models import AnonymousUser

    html = _render_tag(AnonymousUser())
    assert "assistant-dock" not in html and "assistant.css" not in html


def test_the_dock_styles_live_in_the_app_and_not_in_the_site() -> None:
    site_css = (PROJECT_DIR / "static" / "css" / "site.css").read_text()
    assert ".assistant-" not in site_css
    assert not (PROJECT_DIR / "static" / "assistant").exists()
    app_css = (PROJECT_DIR / "assistant" / "static" / "assistant" / "assistant.css").read_text()
    for selector in [".assistant-dock", ".assistant-launcher", ".assistant-message", ".assistant-confirm"]:
        assert selector in app_css


def test_the_site_uses_only_the_public_surface() -> None:
    """The site's templates load the tag; none reaches into the app's templates or static files."""
    base = (PROJECT_DIR / "templates" / "base.html").read_text()
    assert "{% load assistant %}" in base and "{% assistant_dock %}" in base
    for path in (PROJECT_DIR / "templates").rglob("*.html"):
        text = path.read_text()
        assert not re.search(r"""\{%\s*(include|extends)\s+["']assistant/""", text), path
        assert not re.search(r"""\{%\s*static\s+["']assistant/""", text), path
    urls = (PROJECT_DIR / "config" / "urls.py").read_text()
    # One include of the assistant's URLs, with the optional sub-apps' routes the site installs (assistant_urls).
    assert urls.count("include(assistant_urls(") == 1
    assert "assistant.views" not in urls


NO_HOST_TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                           "django.contrib.auth.context_processors.auth",
                                           "django.contrib.messages.context_processors.messages"]},
    }
]


@pytest.fixture
def assistant_without_layout() -> Iterator[None]:
    from django.conf import settings

    plain = {key: value for key, value in settings.ASSISTANT.items() if key != "PAGE_LAYOUT"}
    with override_settings(ASSISTANT=plain):
        yield


@pytest.mark.django_db
@pytest.mark.usefixtures("assistant_without_layout")
def test_the_assistant_page_stands_alone_in_a_project_with_no_base_template(auth_client: Client) -> None:
    with override_settings(TEMPLATES=NO_HOST_TEMPLATES):
        response = auth_client.get(reverse("assistant:page"))
    assert response.status_code == 200
    page = response.content.decode()
    assert page.lstrip().lower().startswith("<!doctype html>")
    assert "data-assistant-conversation" in page
    assert '"/static/assistant/assistant.css"' in page and '"/static/assistant/conversation.js"' in page
    assert 'id="assistant-dock"' not in page
    assert 'class="site-header"' not in page


@pytest.mark.django_db
def test_the_assistant_page_fills_the_block_of_the_layout_the_setting_names(
    auth_client: Client, tmp_path: Path
) -> None:
    (tmp_path / "shell.html").write_text(
        "{% load assistant %}<!doctype html><html><body><nav>HOST NAV</nav>"
        "<div id=host-main>{% block main %}HOST DEFAULT{% endblock %}</div>{% assistant_dock %}</body></html>"
    )
    templates = [{**NO_HOST_TEMPLATES[0], "DIRS": [tmp_path]}]
    with override_settings(TEMPLATES=templates, ASSISTANT={"PAGE_LAYOUT": {"template": "shell.html", "block": "main"}}):
        page = auth_client.get(reverse("assistant:page")).content.decode()
    assert "HOST NAV" in page and "HOST DEFAULT" not in page
    assert page.index("<div id=host-main>") < page.index("data-assistant-conversation")
    assert '"/static/assistant/assistant.css"' in page and '"/static/assistant/conversation.js"' in page
    # The full page is the assistant: the host's dock tag draws no second copy on it.
    assert 'id="assistant-dock"' not in page


@pytest.mark.django_db
def test_this_site_shows_the_assistant_page_in_its_own_shell_through_the_setting(auth_client: Client) -> None:
    from django.conf import settings

    assert settings.ASSISTANT["PAGE_LAYOUT"] == {"template": "base.html", "block": "content"}
    page = auth_client.get(reverse("assistant:page")).content.decode()
    assert 'class="site-header"' in page and "data-assistant-conversation" in page
    assert 'id="assistant-dock"' not in page


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ({"template": "base.html", "block": "content %}{% debug"}, "block"),
        ({"template": "base.html"}, "block"),
        ({"template": "no-such-layout.html", "block": "content"}, "no-such-layout.html"),
        # A block the layout never shows would leave the page without the assistant, silently.
        ({"template": "base.html", "block": "sidebar"}, "does not render"),
        ("base.html", "template"),
    ],
)
def test_a_wrong_page_layout_is_a_clear_configuration_error(auth_client: Client, layout: Any, message: str) -> None:
    with override_settings(ASSISTANT={"PAGE_LAYOUT": layout}), pytest.raises(ImproperlyConfigured) as raised:
        auth_client.get(reverse("assistant:page"))
    assert "PAGE_LAYOUT" in str(raised.value) and message in str(raised.value)
