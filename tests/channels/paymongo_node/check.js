// PayMongo's official Node SDK (paymongo-node, pinned in package.json) driving the PayMongo emulator: what it reads
// and what it refuses is printed as one JSON object for tests/channels/test_paymongo_node_sdk.py to judge.
//
// Input (stdin, JSON): {url, secret_key, webhook_secret, webhooks: [{payload, header}]}, and for the API's part
// payment_id, refund: {amount, reason, notes, metadata}, over_amount.
"use strict";

const Paymongo = require("paymongo-node");
const services = require("paymongo-node/src/services");

// Two faults of paymongo-node 10.17.0 itself, whatever it is pointed at (PayMongo or the emulator):
// - RefundService.all (src/services/Refund.js) builds its list with ApiResource but never requires it: every
//   non-empty list throws ReferenceError. The SDK's own ApiResource is given globally, so the list is still read by
//   the SDK's code.
// - Its entities assign `attributes` without declaring it (an implicit global): a Payment with two or more refunds
//   reads its second refund from the first refund's attributes and throws. payments.retrieve is asked here of a
//   payment with one refund; the adapter reads payments from the API itself and never through this SDK.
global.ApiResource = require("paymongo-node/src/ApiResource");

function client(url, key) {
  // The SDK's own wiring (src/paymongo.js) with the emulator as its API root instead of https://api.paymongo.com.
  const paymongo = Paymongo(key);
  paymongo.baseUrl = url;
  for (const name of Object.keys(services)) {
    paymongo[name] = new services[name](paymongo);
  }
  return paymongo;
}

function refused(error) {
  if (!error || !Array.isArray(error.errors)) {
    throw error;
  }
  return { type: error.type, codes: error.errors.map((e) => e.code), details: error.errors.map((e) => e.detail) };
}

function refundView(refund) {
  return {
    id: refund.id, amount: refund.amount, currency: refund.currency, payment_id: refund.payment_id,
    reason: refund.reason, status: refund.status, notes: refund.notes, metadata: refund.metadata,
    livemode: refund.livemode,
  };
}

async function main(input) {
  const paymongo = client(input.url, input.secret_key);
  const out = { webhooks: input.webhooks.map((webhook) => constructed(paymongo, webhook, input.webhook_secret)) };
  if (!input.payment_id) {
    return out; // the webhooks only (every PayMongo test's emulator at teardown)
  }

  const payment = await paymongo.payments.retrieve(input.payment_id);
  out.payment = {
    id: payment.id, amount: payment.amount, currency: payment.currency, status: payment.status,
    source: payment.source, refunds: payment.refunds.map((r) => r.id), fee: payment.fee,
    net_amount: payment.net_amount,
  };

  const created = await paymongo.refunds.create({ payment_id: input.payment_id, ...input.refund });
  out.created = refundView(created);
  out.retrieved = refundView(await paymongo.refunds.retrieve(created.id));
  const listed = await paymongo.refunds.all({ payment_id: input.payment_id, limit: 100 });
  out.listed = { has_more: listed.has_more, data: listed.data.map(refundView) };

  try {
    await paymongo.refunds.create({ payment_id: input.payment_id, amount: input.over_amount, reason: "others" });
    out.over_refund = { refused: null };
  } catch (error) {
    out.over_refund = { refused: refused(error) };
  }
  const after = await paymongo.refunds.all({ payment_id: input.payment_id, limit: 100 });
  out.listed_after_over_refund = after.data.length;

  try {
    await client(input.url, "sk_test_wrong").refunds.retrieve(created.id);
    out.wrong_key = { refused: null };
  } catch (error) {
    out.wrong_key = { refused: refused(error) };
  }

  return out;
}

function constructed(paymongo, webhook, secret) {
  const event = paymongo.webhooks.constructEvent({
    payload: webhook.payload, signatureHeader: webhook.header, webhookSecretKey: secret,
  });
  let tampered;
  try {
    paymongo.webhooks.constructEvent({
      payload: webhook.payload + " ", signatureHeader: webhook.header, webhookSecretKey: secret,
    });
    tampered = "accepted";
  } catch (error) {
    tampered = error.constructor.name;
  }
  return { id: event.id, type: event.type, resource_type: event.resource.type, resource_id: event.resource.id,
    tampered };
}

let raw = "";
process.stdin.on("data", (chunk) => { raw += chunk; });
process.stdin.on("end", () => {
  main(JSON.parse(raw)).then(
    (out) => { process.stdout.write(JSON.stringify(out)); },
    (error) => { process.stderr.write(String(error && error.stack || JSON.stringify(error))); process.exit(1); },
  );
});
