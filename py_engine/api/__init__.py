"""OpenAI's API over the engine, host-agnostic: the desktop server (app/openai_api.py) and the
browser worker (web/openai_messages.py) answer the same request bodies with the same chunks.

request.py checks bodies; completions.py runs chat and text completions as chunk streams;
tool_calls.py puts tools into the prompt and takes calls out of the answer; constraints.py turns
response_format and forced tool calls into token masks (constrain/); embeddings.py answers
/v1/embeddings."""
