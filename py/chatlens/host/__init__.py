"""What only the host runs: the command line's jobs, the site's build, the model mirror, the HTTP
server, the benchmark, the export and the model download. The browser's wheel leaves this
package out (chatlens.host.build), and no runtime module imports it.
"""
