"""Admin forms: a merchant public key is uploaded as a PEM file (or pasted) and checked before any write."""

from django import forms

from apps.common import signing
from apps.currencies.models import Currency
from apps.merchants.models import Merchant
from apps.merchants.services import MerchantInputError, callback_url_check

MAX_PEM_BYTES = 16 * 1024


class PublicKeyFormMixin(forms.Form):
    """Exactly one of an uploaded PEM file or pasted PEM text; RSA, SubjectPublicKeyInfo, >= 2048 bits."""

    public_key_file = forms.FileField(required=False, label="Public key file (PEM)",
                                      help_text="SubjectPublicKeyInfo PEM (-----BEGIN PUBLIC KEY-----), RSA, at least 2048 bits.")
    public_key_text = forms.CharField(required=False, label="or paste the PEM", widget=forms.Textarea(attrs={"rows": 8}))

    def clean(self):
        cleaned = super().clean()
        upload, text = cleaned.get("public_key_file"), (cleaned.get("public_key_text") or "").strip()
        if bool(upload) == bool(text):
            raise forms.ValidationError("Upload a PEM file or paste a PEM public key (one of the two).")
        if upload:
            if upload.size > MAX_PEM_BYTES:
                raise forms.ValidationError("The file is too large to be a PEM public key.")
            try:
                text = upload.read().decode("ascii").strip()
            except UnicodeDecodeError:
                raise forms.ValidationError("The file is not a PEM (text) file.") from None
        try:
            signing.load_public_key(text)
        except ValueError as exc:
            # The message names the problem (type, size); the key material itself is never echoed.
            raise forms.ValidationError(f"Public key refused: {exc}.") from None
        cleaned["public_key_pem"] = text
        cleaned["fingerprint"] = signing.fingerprint(text)
        return cleaned


def _clean_callback_url(value: str) -> str:
    try:
        return callback_url_check(value or "")
    except MerchantInputError as exc:
        raise forms.ValidationError(str(exc)) from None


class MerchantKeyUploadForm(PublicKeyFormMixin):
    merchant = forms.ModelChoiceField(queryset=Merchant.objects.all(), to_field_name="merchant_no")
    reason = forms.CharField(max_length=255, help_text="Why (the merchant's ticket...). The approver sees it.")


class MerchantCreateForm(PublicKeyFormMixin):
    name = forms.CharField(max_length=128)
    currencies = forms.ModelMultipleChoiceField(queryset=Currency.objects.filter(active=True), initial=["PHP"],
                                                help_text="Each gets its default D0/D1 collection and payout products.")
    collection_callback_url = forms.CharField(required=False, max_length=512)
    payout_callback_url = forms.CharField(required=False, max_length=512)

    field_order = ["name", "currencies", "collection_callback_url", "payout_callback_url", "public_key_file",
                   "public_key_text"]

    def clean_collection_callback_url(self):
        return _clean_callback_url(self.cleaned_data.get("collection_callback_url"))

    def clean_payout_callback_url(self):
        return _clean_callback_url(self.cleaned_data.get("payout_callback_url"))


class MerchantChangeForm(forms.ModelForm):
    collection_callback_url = forms.CharField(required=False, max_length=512)
    payout_callback_url = forms.CharField(required=False, max_length=512)

    class Meta:
        model = Merchant
        fields = ["name", "is_active", "collection_callback_url", "payout_callback_url", "administrators"]

    def clean_collection_callback_url(self):
        return _clean_callback_url(self.cleaned_data.get("collection_callback_url"))

    def clean_payout_callback_url(self):
        return _clean_callback_url(self.cleaned_data.get("payout_callback_url"))


class ConfirmForm(forms.Form):
    """An empty form: the admin page only asks for confirmation (e.g. rotating the platform key)."""
