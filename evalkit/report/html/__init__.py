"""The static HTML report: the index page, one detail page per row, inline SVG charts (no side of the
trust boundary: reads rows only, never torch)."""
