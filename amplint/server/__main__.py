from amplint.server.command import server_command

server_command(prog_name="amplint server")
