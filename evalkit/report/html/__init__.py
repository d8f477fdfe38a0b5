"""The static HTML report: the index page, one detail page per row, inline SVG charts."""
