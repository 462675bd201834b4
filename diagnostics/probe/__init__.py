"""`streamtap probe`'s pure half: the catalog of stream endings, the grade of what a client did
about each, and the client's last error line. Fed exit codes, times and record facts by
`streamtap.proxy.probe`; never runs anything itself."""
