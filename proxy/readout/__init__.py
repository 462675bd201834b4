"""Reading traces back: ls, show, tail, the live page, the report and HAR export."""
