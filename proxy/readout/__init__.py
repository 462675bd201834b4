"""Reading traces back: ls, show, tail, the live page, the report, HAR export and the demo."""
