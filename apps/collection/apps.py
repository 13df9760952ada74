from django.apps import AppConfig


class CollectionConfig(AppConfig):
    name = "apps.collection"
    label = "collection"
