# ledger's image: python slim, Java for Spark, the wheel installed by deploy/install.sh (the same script
# tests/test_wheel.py runs in a clean virtualenv). Build from the repository: docker build -t ledger .
FROM python:3.11-slim AS wheel
WORKDIR /src
COPY . .
RUN pip wheel --quiet --no-deps --wheel-dir /dist .

FROM python:3.11-slim
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*
COPY --from=wheel /dist /dist
COPY deploy/install.sh /usr/local/bin/install-ledger
RUN install-ledger /dist/*.whl /opt/ledger s3 && rm -rf /dist /root/.cache
ENV PATH=/opt/ledger/bin:$PATH \
    LEDGER_HOME=/var/lib/ledger
RUN useradd --create-home --home-dir /var/lib/ledger ledger \
    && install -d -o ledger -g ledger /var/lib/ledger/logs /var/lib/ledger/worker
USER ledger
WORKDIR /var/lib/ledger
CMD ["ledger", "--help"]
