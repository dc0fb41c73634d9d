// The program each engine_layer_check_<layer> links: engine/CMakeLists.txt links one layer's
// archive whole beside the layers below it, so the link fails when that layer calls a higher one.
int main() { return 0; }
