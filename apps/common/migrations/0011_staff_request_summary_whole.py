from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('common', '0010_staff_request_access_recovery'),
    ]

    operations = [
        migrations.AlterField(
            model_name='staffrequest',
            name='summary',
            field=models.TextField(help_text='What it changes, in words: every field, credentials first.'),
        ),
    ]
