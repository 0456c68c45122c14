// Thread priorities: request preparation (parsing, grammars, templates, tokenizing) yields
// the CPU to the engine's forward passes, whose threads meet at barriers: one of them kept
// waiting by another thread's work stalls every stream in the step.
#pragma once

namespace autoglm {

// Lowers the calling thread to the background priority (nice +10), once per thread; later
// calls cost a thread-local check. Raising it back needs privileges, so pool threads only.
void use_background_priority();

}  // namespace autoglm
