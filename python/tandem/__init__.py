"""tandem: export PyTorch models whose methods share mutable state, and run them in wasm/JS.

program = tandem.export(model, {"forward": (x,), "reset": ()})
program.save("model.tandem")
m = tandem.load("model.tandem"); m.forward(x); m.reset()
with tandem.load("lm.tandem") as lm: ids = tandem.generate(lm, prompt_ids, max_new_tokens=32)
chat = lm.chat(system="Be brief."); reply = chat.send("Hi!")
"""

from .chat import Chat, ChatStats
from .export import Method, export
from .ir import ExportError
from .lm import generate
from .program import Program
from .runtime import Model, TandemError, load
from .version import __version__

__all__ = ["__version__", "export", "Method", "Program", "ExportError", "load", "Model", "TandemError", "generate", "Chat", "ChatStats"]
