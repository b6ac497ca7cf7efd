// Swagger UI on the ledger's OpenAPI document (a file, not an inline script: the pages' CSP allows no inline script)
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({ url: "/api/openapi.json", dom_id: "#swagger-ui", deepLinking: true });
});
