// A real OAuth 2.0 authorization server for Abode's external auth tests
// (crates/abode/tests/e2e_external_auth.rs): the npm package oidc-provider
// with one confidential client that authenticates in the request body
// (client_secret_post, as GitHub's and GitLab's apps do), authorization
// codes with PKCE, the device flow (RFC 8628: /device/auth, the person
// types the code at /device), refresh tokens, revocation and introspection,
// and its development login and consent pages (any password; the login is
// the person).
//
// Settings come from the environment: CLIENT_ID and CLIENT_SECRET, and
// optionally ACCESS_TOKEN_TTL, the access tokens' lifetime in seconds
// (oidc-provider's ttl.AccessToken; unset keeps its default, an hour;
// refresh tokens keep theirs, 14 days). It listens on 127.0.0.1 at a random
// port and prints one JSON line, {"issuer": "http://127.0.0.1:PORT"}. With
// TLS_CERT and TLS_KEY (PEM files) it serves HTTPS with that certificate
// instead (a provider behind a private certificate authority), and the
// issuer is https://127.0.0.1:PORT.
//
// Access tokens are opaque (no `resource` parameter is used, so they are
// not JWTs for a resource server) and a resource server checks them at the
// introspection endpoint, /token/introspection (the discovery document's
// introspection_endpoint), with this client's client_id and client_secret
// in the body: {"active": true, "sub": ...} while a token is valid,
// {"active": false} once it expired or was revoked (/token/revocation).
//
//   PUT /admin/redirect-uris  ["http://.../external-auth/ID/callback"]
//                             (the server's port is known once it started)

import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import Provider from 'oidc-provider';

const clientId = process.env.CLIENT_ID || 'abode';
const clientSecret = process.env.CLIENT_SECRET;
if (!clientSecret) {
  console.error('CLIENT_SECRET is required');
  process.exit(2);
}
const accessTokenTtl = process.env.ACCESS_TOKEN_TTL;
if (accessTokenTtl !== undefined && !/^[1-9][0-9]*$/.test(accessTokenTtl)) {
  console.error('ACCESS_TOKEN_TTL must be a positive number of seconds');
  process.exit(2);
}
let redirectUris = ['http://127.0.0.1/unset'];
let issuer;
let handler;

function makeProvider() {
  const made = new Provider(issuer, {
    clients: [{
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: redirectUris,
      grant_types: [
        'authorization_code',
        'refresh_token',
        'urn:ietf:params:oauth:grant-type:device_code',
      ],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_post',
    }],
    scopes: ['openid', 'offline_access', 'git'],
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: true },
      revocation: { enabled: true },
      introspection: { enabled: true },
      deviceFlow: { enabled: true },
    },
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    async findAccount(_ctx, sub) {
      return { accountId: sub, async claims() { return { sub }; } };
    },
    cookies: { keys: ['abode-test-oauth-cookie-key'] },
    // Only the access tokens' lifetime is set; the other lifetimes (refresh
    // tokens, grants, sessions: 14 days) stay oidc-provider's defaults.
    ...(accessTokenTtl ? { ttl: { AccessToken: Number(accessTokenTtl) } } : {}),
  });
  made.on('server_error', (_ctx, error) => console.error('server_error', error));
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

const tls = process.env.TLS_CERT && process.env.TLS_KEY
  ? { cert: readFileSync(process.env.TLS_CERT), key: readFileSync(process.env.TLS_KEY) }
  : null;

async function serve(req, res) {
  if (req.method === 'PUT' && req.url === '/admin/redirect-uris') {
    redirectUris = JSON.parse(await readBody(req));
    handler = makeProvider().callback();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ok: true }));
    return;
  }
  handler(req, res);
}

const server = tls ? createTlsServer(tls, serve) : createServer(serve);

server.listen(0, '127.0.0.1', () => {
  issuer = `${tls ? 'https' : 'http'}://127.0.0.1:${server.address().port}`;
  handler = makeProvider().callback();
  console.log(JSON.stringify({ issuer }));
});
