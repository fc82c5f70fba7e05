"""LLM providers behind one small async Protocol; the idea-writer and coder roles; reply parsing."""
