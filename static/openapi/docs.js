// Starts Redoc on the docs page (templates/openapi/docs.html): the schema's URL and Redoc's options come from the
// container's data attributes, so the page needs no inline script.
(function () {
  var container = document.getElementById("redoc-container");
  var settings = container.dataset.settings ? JSON.parse(container.dataset.settings) : {};
  Redoc.init(container.dataset.schemaUrl, settings, container);
})();
