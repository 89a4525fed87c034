#!/usr/bin/env python3
"""Serves a folder over HTTPS on loopback, as a provider network mirror or a module registry is
served.

    https_files.py DIR CERT KEY

Prints the port it listens on (one line), then serves until killed. JSON files go out as
application/json, which Terraform's network mirror client and service discovery require. A
module registry's download endpoint (`.../<version>/download`, a file holding the package's
path) is answered as registries answer it: 204 with the package's URL in `X-Terraform-Get`.
"""

import functools
import http.server
import os
import ssl
import sys


class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        local = self.translate_path(self.path)
        if self.path.rstrip("/").endswith("/download") and os.path.isfile(local):
            with open(local, encoding="utf-8") as f:
                where = f.read().strip()
            self.send_response(204)
            self.send_header("X-Terraform-Get", f"https://{self.headers.get('Host', '127.0.0.1')}{where}")
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


def main(folder, cert, key):
    handler = functools.partial(Handler, directory=folder)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
