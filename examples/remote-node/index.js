// A jetfn remote function in Node: a NATS micro service that jetfn calls once
// per JetStream delivery (docs/remote.md). It is the Go example's
// greeter in Node, for the same manifest (examples/remote-go/manifest.yaml).
//
// It stores one greeting per input in MongoDB and replies with one output,
// greet.done, which jetfn publishes and then acks. The document is keyed by
// the Jetfn-Msg-Id header, the same on every redelivery, so a delivery that
// jetfn sends again (this process died before its reply, the reply was lost)
// stores nothing new, and its output, keyed the same, is dropped by the
// stream as a duplicate. No JetStream code: the reply alone decides whether
// jetfn acks, retries or dead-letters.
//
//   NATS_URL=nats://127.0.0.1:4222 MONGO_URI=mongodb://127.0.0.1:27017/ node index.js
import { connect, headers } from "@nats-io/transport-node";
import { Svcm } from "@nats-io/services";
import { MongoClient, MongoNetworkError, MongoServerSelectionError } from "mongodb";

const SUBJECT = "greeter.handle"; // the manifest's remote.subject
const OUTPUT = "greet.done"; // one of the function's declared outputs
const RETRY_AFTER_SECONDS = "1"; // how long jetfn waits before the next delivery when Mongo is down

const env = {
  natsURL: required("NATS_URL"),
  mongoURI: required("MONGO_URI"),
  database: process.env.MONGO_DATABASE || "jetfn",
};

// A short server selection makes an unreachable Mongo a 503 reply well
// before jetfn's timeout instead of the driver's 30s wait.
const mongo = new MongoClient(env.mongoURI, { serverSelectionTimeoutMS: 2000 });
const greetings = mongo.db(env.database).collection("greetings");
const nc = await connect({ servers: env.natsURL.split(","), name: "greeter", maxReconnectAttempts: -1 });
const service = await new Svcm(nc).add({ name: "greeter", version: "1.0.0", description: "greets, once per input" });

// Requests are handled concurrently (jetfn sends up to the function's
// concurrency at once); shutdown waits for the ones in flight.
const inFlight = new Set();
service.addEndpoint("handle", {
  subject: SUBJECT,
  handler: (err, msg) => {
    if (err) return console.error("greeter: endpoint failed:", err.message);
    const done = handle(msg)
      .catch((e) => msg.respondError(500, `greeter: ${e.message}`))
      .finally(() => inFlight.delete(done));
    inFlight.add(done);
  },
});
console.error(`greeter: ready on ${SUBJECT}`);

for (const signal of ["SIGINT", "SIGTERM"]) process.once(signal, shutdown);

// handle answers one delivery: 400 for a payload no retry can fix (jetfn
// dead-letters it with the description), 503 with Retry-After while Mongo is
// unreachable, 500 for anything else (retried on the manifest's backoff).
async function handle(msg) {
  const id = msg.headers?.get("Jetfn-Msg-Id");
  if (!id) return msg.respondError(400, "no Jetfn-Msg-Id header: not a jetfn delivery");
  let name;
  try {
    name = parseName(msg.string());
  } catch (e) {
    return msg.respondError(400, e.message);
  }
  const greeting = `hello, ${name}`;
  try {
    await store(id, name, greeting);
  } catch (e) {
    if (!(e instanceof MongoNetworkError || e instanceof MongoServerSelectionError)) throw e;
    const h = headers();
    h.set("Retry-After", RETRY_AFTER_SECONDS);
    return msg.respondError(503, `mongo unavailable: ${e.message}`, undefined, { headers: h });
  }
  const data = { greeting, request: id };
  msg.respond(JSON.stringify({ outputs: [{ subject: OUTPUT, data, key: id }] }));
}

// parseName returns the request's name or throws the reason it is malformed.
function parseName(text) {
  let req;
  try {
    req = JSON.parse(text);
  } catch (e) {
    throw new Error(`payload is not JSON: ${e.message}`);
  }
  if (typeof req?.name !== "string" || req.name === "") {
    throw new Error('bad payload: want {"name": "..."}');
  }
  return req.name;
}

// store upserts the greeting under the input's idempotency key;
// $setOnInsert leaves a document that an earlier delivery stored as it was.
async function store(id, name, greeting) {
  try {
    await greetings.updateOne(
      { _id: id },
      { $setOnInsert: { name, greeting, created: new Date() } },
      { upsert: true },
    );
  } catch (e) {
    if (e.code !== 11000) throw e; // 11000: a concurrent delivery inserted it first
  }
}

async function shutdown() {
  await service.stop(); // stops taking requests; queue-group peers take over
  await Promise.allSettled(inFlight);
  await nc.drain();
  await mongo.close();
}

function required(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`${name} is required`);
    process.exit(2);
  }
  return value;
}
