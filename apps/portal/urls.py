from django.urls import path

from apps.portal import developer_views, payout_views, refund_views, signin, views

app_name = "portal"

urlpatterns = [
    path("", views.home, name="home"),
    path("signin/", signin.password_step, name="signin"),
    path("signin/code/", signin.code_step, name="signin-code"),
    path("signin/enrol/", signin.enrol_step, name="signin-enrol"),
    path("signout/", signin.sign_out, name="signout"),
    path("invite/<str:token>/", views.invite_accept, name="invite"),
    path("recover/<str:token>/", views.recovery_accept, name="recover"),
    path("notices/<int:notice_id>/dismiss/", views.notice_dismiss, name="notice-dismiss"),
    path("payins/", views.payin_list, name="payins"),
    path("payins/export.csv", views.payin_export, name="payins-export"),
    path("payins/<str:platform_order_no>/", views.payin_detail, name="payin"),
    path("payins/<str:platform_order_no>/refund/", refund_views.refund_ask, name="payin-refund"),
    path("refunds/", refund_views.refund_list, name="refunds"),
    path("refunds/export.csv", refund_views.refund_export, name="refunds-export"),
    path("refunds/requests/", refund_views.request_list, name="refund-requests"),
    path("refunds/requests/<int:request_id>/", refund_views.request_detail, name="refund-request"),
    path("refunds/requests/<int:request_id>/approve/", refund_views.request_approve, name="refund-request-approve"),
    path("refunds/requests/<int:request_id>/reject/", refund_views.request_reject, name="refund-request-reject"),
    path("refunds/requests/<int:request_id>/withdraw/", refund_views.request_withdraw,
         name="refund-request-withdraw"),
    path("payouts/", views.payout_list, name="payouts"),
    # payouts by hand (before payouts/<platform_order_no>/, which would take "new" and "batches")
    path("payouts/new/", payout_views.payout_new, name="payout-new"),
    path("payouts/batches/", payout_views.batch_list, name="payout-batches"),
    path("payouts/batches/<int:batch_id>/", payout_views.batch_detail, name="payout-batch"),
    path("payouts/batches/<int:batch_id>/approve/", payout_views.batch_approve, name="payout-batch-approve"),
    path("payouts/batches/<int:batch_id>/reject/", payout_views.batch_reject, name="payout-batch-reject"),
    path("payouts/export.csv", views.payout_export, name="payouts-export"),
    path("payouts/<str:platform_order_no>/", views.payout_detail, name="payout"),
    path("callbacks/<int:event_id>/resend/", views.callback_resend, name="callback-resend"),
    path("statements/", views.statements, name="statements"),
    path("team/", views.team, name="team"),
    # the developers page
    path("developers/", developer_views.developers_page, name="developers"),
    path("developers/keys/", developer_views.key_upload, name="developers-key-upload"),
    path("developers/keys/<int:version>/revoke/", developer_views.key_revoke, name="developers-key-revoke"),
    path("developers/keys/<int:version>/confirm/", developer_views.key_confirm, name="developers-key-confirm"),
    path("developers/callback-urls/", developer_views.callback_urls, name="developers-callback-urls"),
    path("developers/test-callback/", developer_views.test_callback, name="developers-test-callback"),
    path("developers/platform_keys.json", developer_views.platform_keys_json, name="developers-platform-keys"),
    path("developers/platform_key_v<int:version>.pem", developer_views.platform_key_pem,
         name="developers-platform-key"),
]
