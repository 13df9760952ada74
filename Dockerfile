FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 UV_LINK_MODE=copy DJANGO_SETTINGS_MODULE=config.settings.production
RUN pip install --no-cache-dir uv
WORKDIR /app
COPY pyproject.toml uv.lock ./
RUN uv sync --frozen --no-dev
COPY . .
RUN SECRET_KEY=build PLATFORM_KEY_ENCRYPTION_KEY=build ALLOWED_HOSTS=x uv run python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["uv", "run", "gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "4"]
