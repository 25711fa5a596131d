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
// Each change answers {"ok": true, "kid": CURRENT_KID}.

import { createServer } from 'node:http';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import Provider from 'oidc-provider';

const clientId = process.env.CLIENT_ID || 'abode';
const clientSecret = process.env.CLIENT_SECRET;
let redirectUris = ['http://127.0.0.1/unset'];
let lastCallback = null;
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
  return made;
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
