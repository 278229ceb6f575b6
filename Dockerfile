# Slim image that runs the collector, the UI or the whole demo: `docker run IMAGE <command>`.
#   docker build -t sweetspot .
#   docker run -p 8501:8501 -v sweetspot-data:/data -e SWEETSPOT_UI_PASSWORD=... sweetspot   # demo
#   docker run -v sweetspot-data:/data -v $PWD/my.toml:/app/deploy/container.toml sweetspot collect
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    SWEETSPOT_CONFIG=/app/deploy/container.toml

WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt

COPY core ./core
COPY app ./app
COPY collectors ./collectors
COPY db ./db
COPY simulator ./simulator
COPY sweep ./sweep
COPY deploy ./deploy
# the documentation the messages cite (docs/alerts.md, docs/sweep.md, ...), and `rules docs` reads
COPY docs ./docs

RUN useradd --create-home --uid 10001 sweetspot \
    && mkdir -p /data && chown sweetspot /data
USER sweetspot
VOLUME ["/data"]
EXPOSE 8501
# Healthy while the collector writes rounds (three intervals at most between two); the demo's first
# start backfills a week first, hence the start period. The UI service overrides it (health --ui).
HEALTHCHECK --interval=30s --timeout=10s --start-period=300s --retries=3 CMD ["python", "-m", "app", "health"]

ENTRYPOINT ["python", "-m", "app"]
CMD ["run"]
