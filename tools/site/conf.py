"""Sphinx settings of the course website, built by ``tools/build_site.py`` (read that file first).

The website is Jupyter Book 1's engine without its command-line wrapper: Sphinx, myst-nb (which reads notebooks and
their stored outputs, never running them) and sphinx-book-theme. ``tools/build_site.py`` stages the notebooks into a
temporary source folder, turns the outputs no builder renders by itself (plotly figures, ipywidgets) into HTML, and
passes what depends on the checkout (the Binder address from the README's badge, the folders of the copied
JavaScript) as ``confoverrides``. Everything a page loads is served from the built folder: no CDN.
"""

project = "lmlib"
author = "the lmlib authors"
copyright = "2026, the lmlib authors (MIT licence)"

extensions = ["myst_nb"]

# The notebooks are rendered from their stored outputs, exactly as committed.
nb_execution_mode = "off"
nb_merge_streams = True
nb_render_markdown_format = "myst"   # text/markdown outputs may hold $math$
# myst-nb would load require.js and the ipywidgets HTML manager from a CDN for pages with widget state; the build
# turns each widget into HTML instead (tools/build_site.py), so no widget script is needed.
nb_ipywidgets_js = {}
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

# MathJax 3 from the built folder (copied from the django-static-mathjax wheel by the build), SVG output: no web
# fonts to fetch, so the math draws the same from a server or from disk.
mathjax_path = "mathjax/tex-svg.js"
mathjax3_config = {"svg": {"fontCache": "global"}}

html_theme = "sphinx_book_theme"
html_title = "lmlib: language models from n-grams to BERT"
html_copy_source = True          # the theme's download button serves _sources/; the build puts the original notebooks there
html_sourcelink_suffix = ""
html_last_updated_fmt = None
html_show_sphinx = False
# the stored outputs (plotly figures, tables, bertviz views) are drawn for a light page; the theme's button switches
html_context = {"default_mode": "light"}
html_css_files = ["lmlib-site.css"]
html_js_files = [("lmlib-site.js", {"defer": "defer"})]
html_favicon = "static/lmlib-favicon.svg"   # a page without one makes the browser ask for /favicon.ico, a 404
html_static_path = ["static"]    # plus the build's copies of plotly.js and MathJax (confoverrides)


def _per_page_scripts(app, pagename, templatename, context, doctree):
    """plotly.js (4.6 MB) only on the pages that hold a figure."""
    if "lmlib-plotly-json" in context.get("body", ""):
        app.add_js_file("plotly.min.js", priority=400)


def setup(app):
    app.connect("html-page-context", _per_page_scripts)
