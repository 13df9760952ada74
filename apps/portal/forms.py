
from django import forms
from django.contrib.auth import password_validation

from apps.portal.models import Role


class StatementForm(forms.Form):
    date = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}))
    currency = forms.ChoiceField()

    def __init__(self, *args, currencies: list[str], today: date, **kwargs):
        super().__init__(*args, **kwargs)
        self.today = today
        self.fields["currency"].choices = [(code, code) for code in currencies]
        self.fields["date"].widget.attrs["max"] = today.isoformat()
        self.fields["date"].help_text = "A day in Manila time; today's statement is provisional."

    def clean_date(self):
        day = self.cleaned_data["date"]
        if day > self.today:
            raise forms.ValidationError("That day has not begun yet in Manila.")
        return day


class InviteForm(forms.Form):
    username = forms.CharField(label="Sign-in name (their e-mail)", max_length=150)
    # The least access is the default: an owner gives more by choosing it, never by missing the field.
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)


class MemberForm(forms.Form):
    member = forms.IntegerField()
    role = forms.ChoiceField(choices=[("", "")] + list(Role.choices), required=False)
    active = forms.ChoiceField(choices=[("", ""), ("1", "on"), ("0", "off")], required=False)


class InviteAcceptForm(forms.Form):
    password1 = forms.CharField(label="Password", strip=False,
                                widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
                                help_text=password_validation.password_validators_help_text_html())
    password2 = forms.CharField(label="Password again", strip=False,
                                widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("password1") and cleaned.get("password1") != cleaned.get("password2"):
            self.add_error("password2", "The two passwords differ.")
        return cleaned
