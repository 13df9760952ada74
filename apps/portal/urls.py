from django.urls import path

from apps.portal import signin, views

app_name = "portal"

urlpatterns = [
    path("", views.home, name="home"),
    path("signin/", signin.password_step, name="signin"),
    path("signin/code/", signin.code_step, name="signin-code"),
    path("signin/enrol/", signin.enrol_step, name="signin-enrol"),
    path("signout/", signin.sign_out, name="signout"),
    path("invite/<str:token>/", views.invite_accept, name="invite"),
    path("payins/", views.payin_list, name="payins"),
    path("payins/export.csv", views.payin_export, name="payins-export"),
    path("payins/<str:platform_order_no>/", views.payin_detail, name="payin"),
    path("payouts/", views.payout_list, name="payouts"),
    path("payouts/export.csv", views.payout_export, name="payouts-export"),
    path("payouts/<str:platform_order_no>/", views.payout_detail, name="payout"),
    path("callbacks/<int:event_id>/resend/", views.callback_resend, name="callback-resend"),
    path("statements/", views.statements, name="statements"),
    path("team/", views.team, name="team"),
]
