//! OpenAI-compatible Chat Completions (in progress).
