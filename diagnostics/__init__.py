"""streamtap's pure core: fed bytes, timestamps and the facts of how a connection ended, it returns
data (records, verdicts, summaries). Nothing here reads a clock, a socket or a file."""
