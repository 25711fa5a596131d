// A real OpenID provider for Abode's single sign-on tests
// (crates/abode/tests/e2e_oidc.rs): the npm package oidc-provider with its
// own generated signing key, one confidential client (Abode), people with a
// `groups` claim and a verified email, and its development login and
// consent pages (any password; the login is the person's subject).
//
// Settings come from the environment: CLIENT_ID and CLIENT_SECRET. It
// listens on 127.0.0.1 at a random port and prints one JSON line,
// {"issuer": "http://127.0.0.1:PORT"}.
//
// The test changes it through /admin (loopback only, like the rest):
//   PUT  /admin/redirect-uris  ["http://.../api/v1/oidc/callback"] (the
//                              server's port is known once it started)
//   PUT  /admin/users/SUB      {"email", "email_verified", "preferred_username", "groups"}
//   POST /admin/rotate         a new signing key replaces the old one (the
//                              old kid is no longer published)
//   GET  /admin/last-callback  the last redirect back to the client, with
//                              its code and state (to replay it)
//   PUT  /admin/forge          {"forge": KIND} or {"forge": null}: the token
//                              endpoint lies (below) until told otherwise
// Each change answers {"ok": true, "kid": CURRENT_KID}.
//
// The hostile provider (issue 46): with a forgery set, every answer of the
// token endpoint keeps what the real provider made (its code exchange, its
// access token for userinfo) but carries another ID token in place of the
// one it signed, made from that one with jose (oidc-provider's own JWT
// library, pinned in package.json):
//   none         the same claims, unsigned (`alg: none`)
//   audience     signed by the provider's key, for another client
//   issuer       signed by the provider's key, from another issuer
//   expired      signed by the provider's key, expired an hour ago
//   replay       the ID token the provider signed for the sign-in before
//                (its nonce is that sign-in's)
//   hmac         signed with HS256 keyed by the client secret, which
//                the client knows too (so it proves nothing of the provider)
//   foreign-key  signed by a key of the forger's under the provider's kid
// The forgery stays set across sign-ins; {"forge": null} ends it.

import { createServer } from 'node:http';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import Provider from 'oidc-provider';
import {
  SignJWT, UnsecuredJWT, decodeJwt, decodeProtectedHeader, importJWK,
} from 'jose';

const clientId = process.env.CLIENT_ID || 'abode';
const clientSecret = process.env.CLIENT_SECRET;
let redirectUris = ['http://127.0.0.1/unset'];
let lastCallback = null;
// The token endpoint's lie (null: it tells the truth), and the last ID
// token the provider itself signed (what `replay` answers the next with).
let forgery = null;
let lastIdToken = null;
const FORGERIES = ['none', 'audience', 'issuer', 'expired', 'replay', 'hmac', 'foreign-key'];
if (!clientSecret) {
  console.error('CLIENT_SECRET is required');
  process.exit(2);
}

const users = new Map();

function newKey() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'RS256', use: 'sig' };
}

let key = newKey();
// The forger's own key, which the provider never publishes.
const forgerKey = newKey();
let issuer;
let provider;
let handler;

function makeProvider() {
  const made = new Provider(issuer, {
    clients: [{
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: redirectUris,
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    }],
    jwks: { keys: [key] },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['preferred_username', 'name'],
      groups: ['groups'],
    },
    scopes: ['openid', 'email', 'profile', 'groups'],
    // The person's claims in the ID token too, as Keycloak and Okta do
    // (the userinfo endpoint has them as well).
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    features: { devInteractions: { enabled: true } },
    async findAccount(_ctx, sub) {
      const user = users.get(sub) || {
        email: `${sub}@example.com`,
        email_verified: true,
        preferred_username: sub,
        groups: [],
      };
      return {
        accountId: sub,
        async claims() {
          return { sub, name: user.preferred_username, ...user };
        },
      };
    },
    cookies: { keys: ['abode-test-cookie-key'] },
  });
  made.on('server_error', (_ctx, error) => console.error('server_error', error));
  made.use(async (ctx, next) => {
    await next();
    const location = ctx.response.get('location');
    if (location && redirectUris.some((uri) => location.startsWith(`${uri}?`))) {
      lastCallback = location;
    }
  });
  // The hostile token endpoint: the answer the real provider made, with
  // its ID token swapped for a forged one.
  made.use(async (ctx, next) => {
    await next();
    if (ctx.method !== 'POST' || ctx.path !== '/token' || ctx.status !== 200
        || typeof ctx.body?.id_token !== 'string') {
      return;
    }
    const issued = ctx.body.id_token;
    const earlier = lastIdToken;
    lastIdToken = issued;
    if (forgery) {
      ctx.body = { ...ctx.body, id_token: await forge(forgery, issued, earlier) };
    }
  });
  return made;
}

// The ID token `issued` (the real provider's), forged as `kind` says.
async function forge(kind, issued, earlier) {
  const header = decodeProtectedHeader(issued);
  const claims = decodeJwt(issued);
  const now = Math.floor(Date.now() / 1000);
  const signed = async (changed, signingKey = key) => new SignJWT({ ...claims, ...changed })
    .setProtectedHeader({ ...header, kid: key.kid })
    .sign(await importJWK(signingKey, header.alg));
  switch (kind) {
    case 'none':
      return new UnsecuredJWT(claims).encode();
    case 'audience':
      return signed({ aud: 'another-client' });
    case 'issuer':
      return signed({ iss: 'https://forged-issuer.example.com' });
    case 'expired':
      return signed({ iat: now - 2 * 3600, exp: now - 3600 });
    case 'replay':
      if (!earlier) {
        throw new Error('replay: the provider has signed no ID token before this one');
      }
      return earlier;
    case 'hmac':
      return new SignJWT(claims)
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .sign(new TextEncoder().encode(clientSecret));
    case 'foreign-key':
      return signed({}, forgerKey);
    default:
      throw new Error(`no such forgery: ${kind}`);
  }
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    let data = '';
    req.on('data', (chunk) => { data += chunk; });
    req.on('end', () => resolve(data));
    req.on('error', reject);
  });
}

async function admin(req, res) {
  const reply = (status, body) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const user = req.url.match(/^\/admin\/users\/([^/?]+)$/);
  if (req.method === 'PUT' && user) {
    users.set(decodeURIComponent(user[1]), JSON.parse(await readBody(req)));
    return reply(200, { ok: true, kid: key.kid });
  }
  if (req.method === 'PUT' && req.url === '/admin/redirect-uris') {
    redirectUris = JSON.parse(await readBody(req));
    provider = makeProvider();
    handler = provider.callback();
    return reply(200, { ok: true, kid: key.kid });
  }
  if (req.method === 'GET' && req.url === '/admin/last-callback') {
    return reply(200, { url: lastCallback });
  }
  if (req.method === 'PUT' && req.url === '/admin/forge') {
    const wanted = JSON.parse(await readBody(req)).forge ?? null;
    if (wanted !== null && !FORGERIES.includes(wanted)) {
      return reply(400, { error: `no such forgery: ${wanted} (${FORGERIES.join(', ')})` });
    }
    forgery = wanted;
    return reply(200, { ok: true, kid: key.kid });
  }
  if (req.method === 'POST' && req.url === '/admin/rotate') {
    key = newKey();
    provider = makeProvider();
    handler = provider.callback();
    return reply(200, { ok: true, kid: key.kid });
  }
  return reply(404, { error: 'no such admin route' });
}

const server = createServer((req, res) => {
  if (req.url.startsWith('/admin/')) {
    admin(req, res).catch((error) => {
      res.writeHead(500);
      res.end(String(error));
    });
    return;
  }
  handler(req, res);
});

server.listen(0, '127.0.0.1', () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  provider = makeProvider();
  handler = provider.callback();
  console.log(JSON.stringify({ issuer }));
});
