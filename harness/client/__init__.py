"""The model client: every model call, agents' and judges' alike, over the OpenAI-compatible chat
API (its configuration, images, keys, endpoint slots, transport with deadlines, structured output),
and the reading of verdicts from what a model replies."""
