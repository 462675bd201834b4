"""The response body's hot path: `tap` takes the body off aiohttp's client parser as it arrives,
`relay` writes it to the client and feeds the recorder a de-framed copy."""
