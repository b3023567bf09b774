"""Taking a file in, giving it back to its person, and letting it go.

A file's type is what its content says, not what its name or the browser claims: a picture must start as that kind
of picture does, a PDF as a PDF, and text must be UTF-8 without NUL characters. Only the types in
`ATTACHMENT_TYPES` are taken, up to `ATTACHMENT_MAX_BYTES`; a refused file is not stored at all.
"""

from __future__ import annotations

import hashlib
import mimetypes
import unicodedata
from dataclasses import dataclass
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile, UploadedFile
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.text import get_valid_filename

from assistant.conf import assistant_settings
from assistant.models import AgentAttachment

# What the first bytes of a file of each binary type are.
SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "application/pdf": (b"%PDF-",),
}
# Names the system's table may not know, or knows otherwise.
EXTENSION_TYPES = {".md": "text/markdown", ".markdown": "text/markdown", ".csv": "text/csv",
                   ".json": "application/json", ".webp": "image/webp", ".htm": "text/html", ".html": "text/html",
                   ".txt": "text/plain"}
# Each type as a person calls it, for saying which are taken.
TYPE_WORDS = {"text/plain": "text", "text/csv": "CSV", "text/markdown": "Markdown", "text/html": "HTML",
              "application/json": "JSON", "application/pdf": "PDF", "image/png": "PNG", "image/jpeg": "JPEG",
              "image/gif": "GIF", "image/webp": "WebP"}
TEXT_TYPES = frozenset({"text/plain", "text/csv", "text/markdown", "text/html", "application/json"})
NAME_MAX_CHARS = 255


class AttachmentRefused(Exception):
    """A file that is not taken; `code` is stable, `message` for people, `status` the HTTP status that says it."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    types: tuple[str, ...]

    @classmethod
    def current(cls) -> Limits:
        return cls(max_bytes=int(assistant_settings.ATTACHMENT_MAX_BYTES),
                   types=tuple(assistant_settings.ATTACHMENT_TYPES))


def size_words(size: int) -> str:
    """A size as a person reads it: 812 bytes, 14 KB, 3.2 MB."""
    if size < 1024:
        return f"{size} byte{'' if size == 1 else 's'}"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def shown_name(raw: str) -> str:
    """The file's own name, as the person sees it: its last path part, without control characters."""
    name = (raw or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C").strip()
    return name[:NAME_MAX_CHARS] or "file"


def content_type(name: str, head: bytes, body: bytes) -> str | None:
    """The type the content says, among the types this module knows; None when the content is not what its name
    claims (or is no type known here)."""
    extension = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    claimed = EXTENSION_TYPES.get(extension) or mimetypes.guess_type(name)[0] or ""
    for kind, signatures in SIGNATURES.items():
        if head.startswith(signatures):
            return kind if claimed in ("", kind) or claimed == "application/octet-stream" else None
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp" if claimed in ("", "image/webp") else None
    if claimed in SIGNATURES or claimed == "image/webp":
        return None  # named a picture or a PDF, but not one
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\x00" in text:
        return None
    return claimed if claimed in TEXT_TYPES else "text/plain"


def _read(upload: UploadedFile, limit: int) -> bytes:
    chunks, total = [], 0
    for chunk in upload.chunks():
        total += len(chunk)
        if total > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> AttachmentRefused:
    return AttachmentRefused("too_large", f"Files are limited to {size_words(limit)}; this one is larger.", 413)


def refuse_declared_size(declared: Any) -> None:
    """Refuse an upload whose request says it is too large, before any of it is read."""
    limit = Limits.current().max_bytes
    try:
        size = int(declared)
    except (TypeError, ValueError):
        return
    # The form's other parts and boundaries take a little room beside the file itself.
    if size > limit + 64 * 1024:
        raise _too_large(limit)


def attachment_store(*, user: Any, upload: UploadedFile | None) -> AgentAttachment:
    """Keep `upload` for `user`, not yet sent; refused (AttachmentRefused, nothing stored) when it is empty, too
    large, or of a type not taken."""
    if upload is None:
        raise AttachmentRefused("no_file", "Choose a file to attach.")
    limits = Limits.current()
    if upload.size is not None and upload.size > limits.max_bytes:
        raise _too_large(limits.max_bytes)
    body = _read(upload, limits.max_bytes)
    if not body:
        raise AttachmentRefused("empty_file", "This file is empty.")
    name = shown_name(upload.name or "")
    kind = content_type(name, body[:16], body)
    if kind is None or kind not in limits.types:
        allowed = ", ".join(dict.fromkeys(TYPE_WORDS.get(kind, kind) for kind in limits.types))
        raise AttachmentRefused("unsupported_type", f"“{name}” cannot be attached: its content is not of a type "
                                                    f"taken here ({allowed}).", 415)
    attachment = AgentAttachment(owner=user, name=name, content_type=kind, size=len(body),
                                 sha256=hashlib.sha256(body).hexdigest())
    stored_name = get_valid_filename(name) if any(ch.isalnum() for ch in name) else "file"
    with transaction.atomic():
        attachment.file.save(stored_name[:100], ContentFile(body), save=False)
        attachment.save()
    return attachment


def attachment_copy(attachment: AgentAttachment) -> AgentAttachment:
    """A new, unsent attachment of the same person with the same content: a file a message sent goes again with the
    message that rewrites it, and each copy goes with its own message's chat and branch."""
    copy = AgentAttachment(owner_id=attachment.owner_id, name=attachment.name, content_type=attachment.content_type,
                           size=attachment.size, sha256=attachment.sha256)
    with attachment.file.open("rb") as handle:
        body = handle.read()
    stored_name = (attachment.file.name or "file").rsplit("/", 1)[-1]
    with transaction.atomic():
        copy.file.save(stored_name[:100], ContentFile(body), save=False)
        copy.save()
    return copy


def attachment_get(*, user: Any, attachment_id: Any) -> AgentAttachment | None:
    """One of the person's own attachments whose content is kept, or None (another person's is as missing)."""
    try:
        return AgentAttachment.objects.for_user(user).filter(removed_at__isnull=True).get(pk=int(attachment_id))
    except (AgentAttachment.DoesNotExist, TypeError, ValueError):
        return None


def attachment_upload(*, user: Any, attachment_id: Any) -> UploadedFile | None:
    """One of the person's own kept attachments as the upload a form's file field takes (its name, type and
    content, as their browser would have sent it); None for anything else."""
    attachment = attachment_get(user=user, attachment_id=attachment_id)
    if attachment is None:
        return None
    with attachment.file.open("rb") as handle:
        return SimpleUploadedFile(attachment.name, handle.read(), content_type=attachment.content_type)


def attachments_remove_content(attachments: Any) -> int:
    """Delete the stored content of `attachments` (a queryset), keeping their rows: at once for the rows, and for
    the stored files once that is committed (a rollback keeps both). How many were removed."""
    doomed = list(attachments.filter(removed_at__isnull=True).exclude(file="").values_list("pk", "file"))
    if not doomed:
        return 0
    AgentAttachment.objects.filter(pk__in=[pk for pk, _ in doomed]).update(file="", removed_at=timezone.now())
    storage = AgentAttachment._meta.get_field("file").storage

    def delete_files() -> None:
        for _, name in doomed:
            storage.delete(name)

    transaction.on_commit(delete_files)
    return len(doomed)


def is_image(attachment: AgentAttachment) -> bool:
    return attachment.content_type.startswith("image/")


def is_text(attachment: AgentAttachment) -> bool:
    return attachment.content_type in TEXT_TYPES


def attachment_payload(attachment: AgentAttachment) -> dict[str, Any]:
    """An attachment as the protocol shows it (docs/protocol.md, "Attachment"): `url` is where its person opens
    it, null once its content is gone."""
    kept = attachment.removed_at is None and bool(attachment.file)
    return {"id": attachment.pk, "name": attachment.name, "content_type": attachment.content_type,
            "size": attachment.size, "url": reverse("assistant:attachment", args=[attachment.pk]) if kept else None}


def on_attachment_deleted(sender: Any, instance: AgentAttachment, **kwargs: Any) -> None:
    """Django's `post_delete` for an attachment row (deleted with its message, by a prune, say): its stored
    content goes too, once the deletion is committed (a rollback keeps both)."""
    stored, storage = instance.file.name, instance.file.storage
    if stored:
        transaction.on_commit(lambda: storage.delete(stored))
