"""/api/docs: Swagger UI on the API's OpenAPI document, its files served from the package swagger-ui-py
(Apache-2.0; Swagger UI 5, which reads the OpenAPI 3.1 document FastAPI writes, where the 4.15 of swagger-ui-bundle
rendered nothing), never from a CDN: it works offline and under the pages' Content-Security-Policy."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse
from swagger_ui.utils import SWAGGER_UI_PY_ROOT

from ledger.core.errors import NotFound
from ledger.web.render import render

router = APIRouter(include_in_schema=False)
ASSETS = {"swagger-ui.css": "text/css", "swagger-ui-bundle.js": "text/javascript"}
INIT = Path(__file__).resolve().parent / "static" / "swagger-init.js"


@router.get("/api/docs", response_class=HTMLResponse)
def docs() -> HTMLResponse:
    return HTMLResponse(render("swagger.html"))


@router.get("/api/docs/{name}")
def asset(name: str) -> FileResponse:
    if name == "swagger-init.js":
        return FileResponse(INIT, media_type="text/javascript")
    if name not in ASSETS:
        raise NotFound(f"no file {name!r} of the API documentation")
    return FileResponse(Path(SWAGGER_UI_PY_ROOT) / "static" / name, media_type=ASSETS[name])
