#include <iostream>
int main() { std::cout << "frugal\n"; }
