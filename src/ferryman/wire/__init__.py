"""The wire protocol between ferryman and its data plane: the kinds of record
pushed into NGINX's memory (``records``) and the push body that carries them
(``push``). ``dataplane/lua/ferryman.lua`` reads the same grammar; its header
spells each record's value."""
