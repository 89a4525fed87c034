#!/usr/bin/env python3
"""Serves a folder over HTTPS on loopback, as a provider network mirror is served.

    https_files.py DIR CERT KEY

Prints the port it listens on (one line), then serves until killed. JSON files go out as
application/json, which Terraform's network mirror client requires.
"""

import functools
import http.server
import ssl
import sys


def main(folder, cert, key):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=folder)
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
