# nerve for Slack or Discord. Build: docker build -t nerve .
# Run: docker run --env-file .env -v nerve-data:/data -p 3000:3000 nerve            (Slack)
#      docker run --env-file .env -v nerve-data:/data nerve nerve discord           (Discord)
# compose.yaml runs the same image with either front end (a profile each).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# tini as PID 1: it passes `docker stop`'s SIGTERM on to nerve (PID 1 would ignore it and be killed
# 10 s later) and reaps the processes of MCP servers that end.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*

# The sources are built and installed from here, then removed: the image runs the installed package.
WORKDIR /src
COPY pyproject.toml requirements.lock README.md ./
COPY bot ./bot
COPY adapters ./adapters
COPY servers ./servers
COPY migrations ./migrations
# The pinned versions of the lock, with the postgres extra (NERVE_DATABASE_URL; psycopg's binary
# wheel brings its own libpq) and without the dev one. The store looks for migrations/ (SQLite's and
# PostgreSQL's) beside the bot package, so they go next to it in site-packages.
RUN pip install -c requirements.lock '.[postgres]' \
 && cp -r migrations "$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/migrations" \
 && rm -rf /src

# Not root: the process can write only its database volume.
RUN useradd --system --uid 10001 --user-group --home-dir /app --no-create-home nerve \
 && mkdir -p /app /data \
 && chown nerve:nerve /data
WORKDIR /app
# The MCP servers file (NERVE_MCP_CONFIG=./mcp.json): the two example servers; mount your own over it.
COPY mcp.json ./mcp.json

ENV NERVE_DB=/data/nerve.db \
    NERVE_HTTP_HOST=0.0.0.0 \
    NERVE_HTTP_PORT=3000
VOLUME /data
# /slack/events over HTTP; /healthz, /readyz and /metrics in every mode.
EXPOSE 3000
USER nerve

# Liveness through /healthz with the standard library only (no curl in the image).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-m", "adapters.healthcheck"]

ENTRYPOINT ["tini", "--"]
CMD ["nerve", "slack"]
