// The models a folder holds (the server's models_dir, openautoglm's ModelRegistry), named as
// llama-server's router names them: each *.gguf file at the top (the first shard stands for a split
// file; mmproj* projectors are no models), each Hugging Face folder (config.json), each folder of one
// GGUF by the folder's name, and each GGUF of a folder of several as "folder/file".
#pragma once

#include <string>
#include <vector>

#include "autoglm/status.h"

namespace autoglm {

struct FolderModel {
  std::string name;  // what requests name it by
  std::string path;  // the file, or the Hugging Face folder
  // RuntimeOptions::mmproj for it: "" finds its projector beside it (its own folder's); a file at
  // the top pairs only with its own X.mmproj.gguf, else "none".
  std::string mmproj;
};

// The models under `dir`, in the order of their paths; the error names the folder.
Result<std::vector<FolderModel>> find_models(const std::string& dir);

}  // namespace autoglm
