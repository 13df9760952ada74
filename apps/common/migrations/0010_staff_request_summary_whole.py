from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('common', '0009_second_factor_history'),
    ]

    operations = [
        migrations.AlterField(
            model_name='staffrequest',
            name='summary',
            field=models.TextField(help_text='What it changes, in words: every field, credentials first.'),
        ),
    ]
