# LiteLLM's proxy from PyPI, pinned to the version tests/test_router.py runs.
FROM python:3.11-slim
RUN pip install --no-cache-dir "litellm[proxy]==1.110.2"
EXPOSE 4000
ENTRYPOINT ["litellm"]
CMD ["--config", "/app/litellm.yml", "--host", "0.0.0.0", "--port", "4000"]
