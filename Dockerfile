FROM python:3.11-slim
# UV_NO_DEV, UV_FROZEN: every `uv run` (CMD, the compose commands) uses the image's environment as synced below,
# without the dev group; by default it would install the test tools at container start.
ENV PYTHONUNBUFFERED=1 UV_LINK_MODE=copy DJANGO_SETTINGS_MODULE=config.settings.production UV_NO_DEV=1 UV_FROZEN=1
RUN pip install --no-cache-dir uv
WORKDIR /app
COPY pyproject.toml uv.lock ./
RUN uv sync --frozen --no-dev
COPY . .
RUN SECRET_KEY=build PLATFORM_KEY_ENCRYPTION_KEY=build ALLOWED_HOSTS=x DATABASE_URL=postgres://build/build \
    REDIS_URL=redis://build uv run python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["uv", "run", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "4", "--access-logfile", "-"]
