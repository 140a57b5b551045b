// Placeholder so the model library has a source before its first files land; removed then.
